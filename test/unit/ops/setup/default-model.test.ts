/**
 * The default model init writes and the choices doctor lists (ops/setup/default-model.ts):
 * the reference model when the catalog has it, else the first standard Claude
 * Opus in droid's order, else the first standard model; never a Fast one;
 * the list of choices is never cut off.
 */
import { describe, expect, it } from 'vitest';
import { choices, suggestedDefault } from '../../../../src/ops/setup/default-model.js';

const model = (id: string, displayName = id) => ({ id, displayName });

describe('suggestedDefault and choices', () => {
  it('prefers the reference model, then the first standard Opus, then the first standard model', () => {
    expect(suggestedDefault([model('claude-opus-5'), model('claude-opus-5-5', 'Opus 5.5')])).toBe('claude-opus-5-5');
    expect(suggestedDefault([model('claude-fable-5'), model('claude-opus-5-fast', 'Opus 5 Fast Mode'), model('claude-opus-5')])).toBe('claude-opus-5');
    expect(suggestedDefault([model('gpt-5.5-fast'), model('odd', 'Odd Fast Mode'), model('gpt-5.5')])).toBe('gpt-5.5');
    expect(suggestedDefault([model('claude-opus-5-5', 'Opus 5.5 Fast Mode')])).toBeUndefined();
    expect(suggestedDefault([])).toBeUndefined();
  });

  it('lists every standard model, however many', () => {
    const many = Array.from({ length: 30 }, (_, i) => model(`m-${i}`));
    expect(choices([...many, model('m-fast')])).toBe(many.map((m) => m.id).join(', '));
    expect(choices([model('x-fast')])).toBe('(the live catalog has no standard model)');
  });
});
