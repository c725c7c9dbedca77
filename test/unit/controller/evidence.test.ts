/**
 * The controller's orchestration with its effects replaced: an in-memory
 * store and scripted workers. (The real store, workers and droid are covered
 * by the store, wire and end-to-end tiers.)
 */
import { describe, expect, it } from 'vitest';
import { create, setup, tick } from './harness.js';

describe('SessionController evidence (structured output, changes, context)', () => {
  const schema = { type: 'object', properties: { answer: { type: 'number' } }, required: ['answer'] };
  const changes = { added: ['a.txt'], modified: [], deleted: [], renamed: [], truncated: 0, outsideWorkspace: false };

  it('refuses a bad outputSchema with invalid_arguments before anything is accepted', async () => {
    const { controller, turns, store } = setup();
    for (const bad of [{ type: 'array' }, { type: 'object', properties: { a: { minLength: 'x' } } }, { type: 'object', description: 'x'.repeat(40_000) }]) {
      await expect(create(controller, 'k-bad', '/ok/a', { outputSchema: bad })).rejects.toMatchObject({ code: 'invalid_arguments' });
    }
    expect(store.sessions.size).toBe(0);
    expect(store.runs.size).toBe(0);
    const ok = await create(controller, 'k-ok');
    await tick();
    turns[0]!.finish({});
    await controller.waitForSessions([ok.metadata.session], 5);
    const runsBefore = structuredClone([...store.runs.values()]);
    await expect(
      controller.send({
        requestKey: 'k-bad-send',
        session: ok.metadata.session,
        prompt: 'p',
        outputSchema: { type: 'object', properties: { a: { $ref: '#/nope' } } },
      }),
    ).rejects.toMatchObject({ code: 'invalid_arguments', message: expect.stringContaining('resolve reference') });
    expect([...store.runs.values()]).toEqual(runsBefore);
    expect(turns).toHaveLength(1);
  });

  it('passes the schema to that turn only, shows the evidence in status and read, and fingerprints the schema', async () => {
    const { controller, turns } = setup();
    const a = await create(controller, 'k1', '/ok/a', { outputSchema: schema });
    await tick();
    expect(turns[0]!.spec.outputSchema).toEqual(schema);
    turns[0]!.finish({ structuredOutput: { answer: 42 }, changes, context: { used: 100, limit: 1000, fraction: 0.1 } });
    await controller.waitForSessions([a.metadata.session], 5);
    expect(controller.status(a.metadata.session).latestRun).toMatchObject({
      state: 'succeeded',
      structuredOutput: { answer: 42 },
      changes,
      context: { used: 100, limit: 1000, fraction: 0.1 },
      needsAttention: false,
    });
    const items = (await controller.read(a.metadata.session)).items;
    expect(items).toContainEqual({ type: 'structured_output', run: a.metadata.run, value: { answer: 42 } });
    expect(items).toContainEqual({ type: 'changes', run: a.metadata.run, changes });
    // Same key: the same schema in another key order replays; another schema conflicts.
    const reordered = { required: ['answer'], properties: { answer: { type: 'number' } }, type: 'object' };
    expect((await create(controller, 'k1', '/ok/a', { outputSchema: reordered })).metadata.replayed).toBe(true);
    await expect(create(controller, 'k1', '/ok/a', { outputSchema: { type: 'object' } })).rejects.toMatchObject({ code: 'request_key_conflict' });
    await expect(create(controller, 'k1', '/ok/a')).rejects.toMatchObject({ code: 'request_key_conflict' });
    // The next turn carries no schema unless it gives one.
    await controller.send({ requestKey: 'k2', session: a.metadata.session, prompt: 'more' });
    await tick();
    expect(turns[1]!.spec.outputSchema).toBeUndefined();
    turns[1]!.finish({ changes: null });
    await controller.waitForSessions([a.metadata.session], 5);
    expect(controller.status(a.metadata.session).latestRun).toMatchObject({ structuredOutput: null, changes: null, context: null });
  });

  it('an off turn that shows changed files needs attention, loudly', async () => {
    const { controller, turns } = setup();
    const a = await create(controller, 'k-off', '/ok/a', { autonomy: 'off' });
    await tick();
    turns[0]!.finish({ changes });
    await controller.waitForSessions([a.metadata.session], 5);
    const run = controller.status(a.metadata.session).latestRun;
    expect(run.needsAttention).toBe(true);
    expect(run.events.map((e) => e.kind)).toContain('readonly_turn_changed_files');
    // Without changes an off turn is fine.
    const b = await create(controller, 'k-off-2', '/ok/b', { autonomy: 'off' });
    await tick();
    turns[1]!.finish({ changes: { ...changes, added: [] } });
    await controller.waitForSessions([b.metadata.session], 5);
    expect(controller.status(b.metadata.session).latestRun.needsAttention).toBe(false);
  });

  it('find filters on hasChanges', async () => {
    const { controller, turns } = setup();
    const a = await create(controller, 'ka', '/ok/a');
    const b = await create(controller, 'kb', '/ok/b');
    const c = await create(controller, 'kc', '/ok/c');
    await tick();
    turns[0]!.finish({ changes });
    turns[1]!.finish({ changes: { ...changes, added: [] } });
    turns[2]!.finish({ changes: null });
    await controller.waitForSessions([a.metadata.session, b.metadata.session, c.metadata.session], 5);
    const ids = async (hasChanges: boolean) => (await controller.find({ hasChanges })).sessions.map((s) => s.session).sort();
    expect(await ids(true)).toEqual([a.metadata.session]);
    expect(await ids(false)).toEqual([b.metadata.session, c.metadata.session].sort());
    expect((await controller.find({})).sessions).toHaveLength(3);
  });
});
