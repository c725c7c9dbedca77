/**
 * What the session tools answer, as the server declares it: the types come
 * from the registered output schemas, so a test reads the real shape rather
 * than a hand-written copy that can drift.
 */
import type { z } from 'zod';
import type { acceptanceOutput, runView, sessionView } from '../../src/mcp/tool-outputs.js';

export type RunView = z.infer<typeof runView>;
export type SessionView = z.infer<typeof sessionView>;
export type Acceptance = z.infer<typeof acceptanceOutput>;
