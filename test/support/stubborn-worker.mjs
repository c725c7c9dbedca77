#!/usr/bin/env node
// A worker that ignores everything after it has started: the cancel message,
// SIGTERM, its deadline. It also leaves a child process running, so a test
// can see that the runner's backstop kills the whole group.
import { spawn } from 'node:child_process';

process.on('SIGTERM', () => undefined);
process.on('message', (message) => {
  if (message?.type !== 'run') return;
  spawn('sleep', ['1000'], { stdio: 'ignore' });
  process.send({ type: 'started', droidSessionId: 'stubborn-session', submittedAt: new Date().toISOString() });
});
setInterval(() => undefined, 60_000);
