// A stand-in for the per-turn worker (runner's `workerEntry`) that breaks the
// IPC contract on purpose. Scenario from FAKE_WORKER_SCENARIO:
//   invalid-terminal    malformed started/progress/terminal (one valid progress), then exit 0
//   invalid-then-valid  malformed messages of every sort, then a valid catalog, started and terminal;
//                       exits on a valid ack (or after 20 s)

const send = (message) => new Promise((resolve) => process.send(message, () => resolve()));

function validResult(droidSessionId) {
  return {
    stop: { kind: 'ended', end: 'completed' },
    outcome: 'succeeded',
    reason: 'completed',
    submitted: true,
    droidSessionId,
    finalText: 'real answer',
    partialText: '',
    usage: null,
    permissionsDeclined: [],
    permissionsApproved: [],
    questions: [],
    transcript: [{ kind: 'assistant', text: 'real answer' }],
    error: null,
    diagnostics: ['from the worker'],
    stderrTail: '',
    durationMs: 5,
  };
}

async function invalidTerminal() {
  await send({ type: 'started', droidSessionId: 7, submittedAt: 'yesterday' });
  await send({ type: 'progress', event: { kind: 'assistant_text', text: 'hello' } });
  await send({ type: 'progress', event: { kind: 'tool_started', tool: 1 } });
  // Claims success, but is not a TurnResult: must never become the run's result.
  await send({ type: 'terminal', result: { outcome: 'succeeded', reason: 'completed', finalText: 'forged answer' } });
  process.exit(0);
}

async function invalidThenValid() {
  await send('just a string');
  await send(null);
  await send([1, 2]);
  await send({ type: 'rename', outcome: { title: '', ok: true, error: null } });
  // A catalog is only a catalog when every entry is one and the list is not empty.
  await send({ type: 'catalog', models: [], answeredAt: new Date().toISOString() });
  await send({ type: 'catalog', models: [{ id: 'forged-model' }, { displayName: 'no id' }], answeredAt: new Date().toISOString() });
  await send({ type: 'catalog', models: [{ id: 'real-model', isNew: true }], answeredAt: '2030-01-02T03:04:05.000Z' });
  await send({ type: 'terminal', result: validResult('sess-1'), extra: 'not in the contract' });
  await send({ type: 'terminal', result: { ...validResult('sess-1'), outcome: 'succeeded', error: { code: 'x', message: 'y', retryable: false } } });
  await send({ type: 'started', droidSessionId: 'sess-1', submittedAt: new Date().toISOString() });
  await send({ type: 'terminal', result: validResult('sess-1') });
}

process.on('message', (message) => {
  if (message?.type === 'ack' && Object.keys(message).length === 1) process.exit(0);
  if (message?.type !== 'run') return;
  const scenario = process.env.FAKE_WORKER_SCENARIO;
  if (scenario === 'invalid-terminal') void invalidTerminal();
  else if (scenario === 'invalid-then-valid') void invalidThenValid();
  else {
    process.stderr.write(`fake-worker: unknown scenario ${scenario}\n`);
    process.exit(3);
  }
});
setTimeout(() => process.exit(4), 20_000);
