/**
 * Caller-owned session metadata: title, labels and the archive flag. Pure.
 * An update changes only these fields (and `updatedAt`): never runs, routing,
 * settings, the workspace or droid's session id, so it can never start,
 * cancel or redirect work.
 */
import type { RunRecord, SessionRecord } from '../../shared/records.js';
import { ControllerError } from '../../shared/public-error.js';
import { isWorking } from './views.js';

export const MAX_LABELS = 20;
const MAX_TITLE_CHARS = 200;
/** Same rule as the create schema, so a label is valid everywhere or nowhere. */
export const MAX_LABEL_CHARS = 50;
export const LABEL_PATTERN = new RegExp(`^[a-z0-9][a-z0-9._:-]{0,${MAX_LABEL_CHARS - 1}}$`);

const LABEL_RULE = `a label is 1 to ${MAX_LABEL_CHARS} characters: lowercase letters, digits and . _ : - (starting with a letter or digit)`;

export interface SessionUpdate {
  /** A new title, or null to clear it. */
  title?: string | null;
  labels?: { add?: readonly string[]; remove?: readonly string[] };
  archived?: boolean;
}

function invalid(message: string, action: string): ControllerError {
  return new ControllerError('invalid_arguments', message, action);
}

/** Throws `invalid_arguments` naming the first label that breaks the rule. */
function assertLabel(label: unknown): asserts label is string {
  if (typeof label !== 'string' || !LABEL_PATTERN.test(label)) {
    const shown = typeof label === 'string' ? JSON.stringify(label.slice(0, 60)) : typeof label;
    // Rejected rather than lowercased: the create schema rejects too, and a
    // silently rewritten label would not match what the caller filters on.
    throw invalid(`invalid label ${shown}: ${LABEL_RULE}`, 'Use lowercase labels such as "bug", "team:web" or "v1.2".');
  }
}

function tooMany(count: number): ControllerError {
  return new ControllerError(
    'too_many_labels',
    `a session has at most ${MAX_LABELS} labels; this change would leave ${count}`,
    'Remove labels in the same update (labels.remove) or add fewer.',
  );
}

/**
 * Validated, deduplicated and sorted labels (sorted so that equal sets look
 * equal in records and fingerprints). Rejects invalid labels and more than
 * MAX_LABELS distinct ones.
 */
export function normalizeLabels(labels: readonly string[]): string[] {
  for (const label of labels) assertLabel(label);
  const unique = [...new Set(labels)].sort();
  if (unique.length > MAX_LABELS) throw tooMany(unique.length);
  return unique;
}

function checkTitle(title: unknown): string | null {
  if (title === null) return null;
  if (typeof title !== 'string' || title.length < 1 || title.length > MAX_TITLE_CHARS || title.trim() === '') {
    throw invalid(`a title is 1 to ${MAX_TITLE_CHARS} characters and not only spaces`, 'Pass a short title, or title: null to clear it.');
  }
  return title;
}

/**
 * The session after `update`, with `updatedAt = now`. `runs` are the
 * session's runs (any order); they are read, never changed.
 */
export function applySessionUpdate(session: SessionRecord, runs: readonly RunRecord[], update: SessionUpdate, now: string): SessionRecord {
  const add = update.labels?.add ?? [];
  const remove = update.labels?.remove ?? [];
  if (!Array.isArray(add) || !Array.isArray(remove)) {
    throw invalid('labels.add and labels.remove are lists of labels', 'Pass labels as {add: [...], remove: [...]}.');
  }
  const hasTitle = update.title !== undefined;
  const hasLabels = add.length > 0 || remove.length > 0;
  const hasArchived = update.archived !== undefined;
  if (!hasTitle && !hasLabels && !hasArchived) {
    throw invalid('the update changes nothing', 'Pass at least one of title, labels.add, labels.remove or archived.');
  }
  if (hasArchived && typeof update.archived !== 'boolean') {
    throw invalid('archived is true or false', 'Pass archived: true to archive, false to restore.');
  }

  const next: SessionRecord = { ...session, labels: [...session.labels], updatedAt: now };
  if (hasTitle) next.title = checkTitle(update.title);

  if (hasLabels) {
    const added = normalizeLabelList(add);
    const removed = normalizeLabelList(remove);
    const both = [...added].filter((l) => removed.has(l));
    if (both.length > 0) {
      throw invalid(`label ${JSON.stringify(both[0])} is both added and removed`, 'Put each label in add or in remove, not both.');
    }
    const labels = new Set(session.labels);
    for (const l of removed) labels.delete(l);
    for (const l of added) labels.add(l);
    if (labels.size > MAX_LABELS) throw tooMany(labels.size);
    next.labels = [...labels].sort();
  }

  // Archiving hides the session from find; doing so while it still has work
  // would hide work in flight, so the caller must settle it first.
  if (update.archived === true && runs.some((r) => isWorking(r.state))) {
    throw new ControllerError(
      'session_busy',
      'this session has queued or running turns, so it cannot be archived now',
      'Wait for the session to settle (droid_wait_for_sessions) or cancel it (droid_cancel_session), then archive it.',
      true,
    );
  }
  if (hasArchived) next.archived = update.archived === true;
  return next;
}

/** Validated and deduplicated, without the MAX_LABELS bound (checked on the result). */
function normalizeLabelList(labels: readonly string[]): Set<string> {
  for (const label of labels) assertLabel(label);
  return new Set(labels);
}
