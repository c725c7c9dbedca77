/** Keeps the last `max` characters; the marker says how much was dropped. */
export function tail(text: string, max: number): string {
  if (text.length <= max) return text;
  return `…[${text.length - max} chars dropped]` + text.slice(text.length - max);
}

/** Keeps the first `max` characters, for summaries of tool input and such. */
export function head(text: string, max: number): string {
  if (text.length <= max) return text;
  return text.slice(0, max) + `…[+${text.length - max} chars]`;
}

/** A compact, bounded rendering of any JSON-ish value. */
export function summarize(value: unknown, max: number): string {
  let text: string;
  if (typeof value === 'string') text = value;
  else {
    try {
      text = JSON.stringify(value) ?? String(value);
    } catch {
      text = String(value);
    }
  }
  return head(text, max);
}

/** A ring of recent text whose total size stays bounded (for stderr tails). */
export class TextTail {
  private chunks: string[] = [];
  private size = 0;
  constructor(private readonly max: number) {}

  push(chunk: string): void {
    this.chunks.push(chunk);
    this.size += chunk.length;
    while (this.size > this.max && this.chunks.length > 1) {
      this.size -= this.chunks.shift()!.length;
    }
  }

  toString(): string {
    return tail(this.chunks.join(''), this.max);
  }
}
