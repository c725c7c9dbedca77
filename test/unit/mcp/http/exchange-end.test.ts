/** The early end of an HTTP exchange (src/mcp/http/exchange-end.ts), which the pipeline hands the MCP side in place of an AbortSignal. */
import { describe, expect, it } from 'vitest';
import { ExchangeEnd, untilEnded } from '../../../../src/mcp/http/exchange-end.js';

describe('ExchangeEnd', () => {
  it('keeps the first reason and tells each listener once; one that stopped listening hears nothing', () => {
    const end = new ExchangeEnd();
    const heard: string[] = [];
    const a = (reason: Error) => heard.push(`a: ${reason.message}`);
    const b = (reason: Error) => heard.push(`b: ${reason.message}`);
    const c = (reason: Error) => heard.push(`c: ${reason.message}`);
    end.listen(a);
    end.listen(b);
    end.listen(c);
    end.unlisten(b);
    expect(end.reason).toBeUndefined();
    end.end(new Error('client gone'));
    end.end(new Error('deadline'));
    expect(end.reason?.message).toBe('client gone');
    expect(heard).toEqual(['a: client gone', 'c: client gone']);
    end.listen(b);
    end.end(new Error('again'));
    expect(heard).toHaveLength(2);
  });

  it('untilEnded: the work when it settles first, the reason when the exchange ends first or had already ended', async () => {
    await expect(untilEnded(Promise.resolve('answer'), new ExchangeEnd())).resolves.toBe('answer');
    await expect(untilEnded(Promise.reject(new Error('failed')), new ExchangeEnd())).rejects.toThrow('failed');

    const ended = new ExchangeEnd();
    ended.end(new Error('too late'));
    await expect(untilEnded(new Promise(() => undefined), ended)).rejects.toThrow('too late');

    const end = new ExchangeEnd();
    const waiting = untilEnded(new Promise(() => undefined), end);
    end.end(new Error('client gone'));
    await expect(waiting).rejects.toThrow('client gone');
  });
});

describe('ExchangeEnd, listeners that act on each other', () => {
  it('skips a listener an earlier one stopped, and one that throws keeps no other from hearing; its error comes after', () => {
    const end = new ExchangeEnd();
    const heard: string[] = [];
    const second = () => heard.push('second');
    end.listen(() => {
      heard.push('first');
      end.unlisten(second);
      throw new Error('first failed');
    });
    end.listen(second);
    end.listen(() => heard.push('third'));
    expect(() => end.end(new Error('client gone'))).toThrow('first failed');
    expect(heard).toEqual(['first', 'third']);
    expect(end.reason?.message).toBe('client gone');
  });
});
