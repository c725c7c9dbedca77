/**
 * The goals (issues 12, 19, 38 and 39), as each benchmark measured them in this run, so
 * `npm run bench` can end with one table of them (run-all.ts).
 */
export interface GoalFigure {
  /** What was measured. */
  name: string;
  /** The figure, with its unit or as a ratio. */
  measured: string;
  /** The goal, as the issue states it. */
  goal: string;
  met: boolean;
  /** Why the goal no longer counts (an issue retired it); printed in place of a verdict. */
  retired?: string;
}

const figures: GoalFigure[] = [];

export function recordGoal(figure: GoalFigure): void {
  figures.push(figure);
}

export function printGoals(): void {
  if (figures.length === 0) return;
  console.log(`${'goal'.padEnd(62)} ${'measured'.padStart(18)}  ${'target'.padEnd(22)} verdict`);
  for (const f of figures) {
    const verdict = f.retired !== undefined ? `retired: ${f.retired}` : f.goal === '-' ? '' : f.met ? 'met' : 'NOT met';
    console.log(`${f.name.padEnd(62)} ${f.measured.padStart(18)}  ${f.goal.padEnd(22)} ${verdict}`);
  }
}
