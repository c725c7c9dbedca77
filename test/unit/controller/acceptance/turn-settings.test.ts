import { describe, expect, it } from 'vitest';
import type { CatalogModel } from '../../../../src/droid/client.js';
import { resolveLaunchSettings, type LaunchDefaults } from '../../../../src/controller/acceptance/turn-settings.js';

const catalog: CatalogModel[] = [
  { id: 'opus', displayName: 'Opus', supportedReasoningEfforts: ['low', 'medium', 'high'], defaultReasoningEffort: 'medium' },
  { id: 'opus-fast', displayName: 'Opus (Fast Mode)', supportedReasoningEfforts: ['low'], defaultReasoningEffort: 'low' },
  { id: 'small', displayName: 'Small', supportedReasoningEfforts: ['none'], defaultReasoningEffort: 'none' },
  { id: 'bare', displayName: 'Bare' },
];
const host: LaunchDefaults = { defaultModel: 'opus', defaultAutonomy: 'medium', maxAutonomy: 'high', reasoningEffort: 'high' };

describe('resolveLaunchSettings on create', () => {
  it('uses host defaults, host effort when supported', () => {
    expect(resolveLaunchSettings({}, null, host, catalog)).toEqual({ model: 'opus', autonomy: 'medium', reasoningEffort: 'high' });
  });

  it("falls back to the model's live default effort", () => {
    expect(resolveLaunchSettings({ model: 'small' }, null, host, catalog).reasoningEffort).toBe('none');
    expect(resolveLaunchSettings({ model: 'bare' }, null, host, catalog).reasoningEffort).toBeNull();
  });

  it('rejects with the documented codes', () => {
    const fail = (fn: () => unknown) => {
      try {
        fn();
      } catch (err) {
        return (err as { code: string }).code;
      }
      return 'no error';
    };
    expect(fail(() => resolveLaunchSettings({ model: 'nope' }, null, host, catalog))).toBe('model_unavailable');
    expect(fail(() => resolveLaunchSettings({}, null, { ...host, defaultModel: null }, catalog))).toBe('model_required');
    expect(fail(() => resolveLaunchSettings({ reasoningEffort: 'max' }, null, host, catalog))).toBe('reasoning_unsupported');
    expect(fail(() => resolveLaunchSettings({ autonomy: 'high' }, null, { ...host, maxAutonomy: 'low' }, catalog))).toBe('autonomy_above_ceiling');
    // A Fast default is refused by its live display name; explicit choice is allowed.
    expect(fail(() => resolveLaunchSettings({}, null, { ...host, defaultModel: 'opus-fast' }, catalog))).toBe('model_unavailable');
    expect(resolveLaunchSettings({ model: 'opus-fast' }, null, host, catalog).model).toBe('opus-fast');
  });
});

describe('resolveLaunchSettings on send (inheritance)', () => {
  const previous = { model: 'opus', autonomy: 'off' as const, reasoningEffort: 'low' };

  it("inherits the session's last model, autonomy and effort, not the host defaults", () => {
    expect(resolveLaunchSettings({}, previous, { ...host, defaultModel: 'small' }, catalog)).toEqual(previous);
  });

  it('caps inherited autonomy at the current ceiling', () => {
    expect(resolveLaunchSettings({}, { ...previous, autonomy: 'high' }, { ...host, maxAutonomy: 'low' }, catalog).autonomy).toBe('low');
  });

  it("a model change never carries the old model's effort", () => {
    expect(resolveLaunchSettings({ model: 'small' }, previous, host, catalog).reasoningEffort).toBe('none');
  });

  it('asks for an explicit effort when nothing is known for the new model', () => {
    expect(() => resolveLaunchSettings({ model: 'bare' }, previous, host, catalog)).toThrow(expect.objectContaining({ code: 'reasoning_required' }));
  });
});
