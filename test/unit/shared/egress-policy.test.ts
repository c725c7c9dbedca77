import { describe, expect, it } from 'vitest';
import {
  decideName,
  entryOfUrl,
  isInternalAddress,
  modelEntries,
  parseAllowEntry,
  usableAddresses,
  type AllowEntry,
} from '../../../src/shared/egress-policy.js';

const entry = (text: string) => parseAllowEntry(text) as AllowEntry;

describe('egress allow entries', () => {
  it('parses hosts, wildcards, ports and bracketed IPv6', () => {
    expect(parseAllowEntry('registry.npmjs.org')).toEqual({ host: 'registry.npmjs.org', port: null, source: 'config' });
    expect(parseAllowEntry('*.GitHub.com')).toEqual({ host: '*.github.com', port: null, source: 'config' });
    expect(parseAllowEntry('127.0.0.1:4873')).toEqual({ host: '127.0.0.1', port: 4873, source: 'config' });
    expect(parseAllowEntry('[::1]:8080')).toEqual({ host: '::1', port: 8080, source: 'config' });
  });

  it('refuses schemes, paths, credentials, bad ports, bare names and wildcard addresses, saying how to write one', () => {
    for (const bad of ['https://registry.npmjs.org', 'host/path', 'user@host', 'host:0', 'host:70000', 'host:x', 'intranet', '*.10.0.0.1', '', 'a..b']) {
      expect(typeof parseAllowEntry(bad), bad).toBe('string');
    }
    expect(parseAllowEntry('https://x.org')).toMatch(/no scheme/);
  });

  it('matches exact hosts on their port, port-less entries on 443 and 80 only, and wildcards below the domain only', () => {
    const entries = ['registry.npmjs.org', '*.github.com', '127.0.0.1:4873'].map(entry);
    expect(decideName(entries, 'registry.npmjs.org', 443).allowed).toBe(true);
    expect(decideName(entries, 'registry.npmjs.org', 80).allowed).toBe(true);
    expect(decideName(entries, 'registry.npmjs.org', 22).allowed).toBe(false);
    expect(decideName(entries, 'api.github.com', 443).allowed).toBe(true);
    expect(decideName(entries, 'github.com', 443).allowed).toBe(false);
    expect(decideName(entries, 'evilgithub.com', 443).allowed).toBe(false);
    expect(decideName(entries, '127.0.0.1', 4873).allowed).toBe(true);
    expect(decideName(entries, '127.0.0.1', 4874).allowed).toBe(false);
    // A wildcard names DNS names, never addresses.
    expect(decideName([entry('*.0.0.1')], '8.0.0.1', 443).allowed).toBe(false);
    expect(decideName([entry('*.0.0.1')], 'a.0.0.1', 443).allowed).toBe(true);
  });

  it('reaches internal addresses only through an exact host-and-port entry (no DNS rebinding through a public name or a wildcard)', () => {
    const internal = [
      '127.0.0.1',
      '10.1.2.3',
      '169.254.169.254',
      '192.168.0.1',
      '172.16.5.5',
      '100.64.0.1',
      '0.0.0.0',
      '::1',
      '::',
      'fe80::1',
      'fd00::1',
      '::ffff:127.0.0.1',
      '::ffff:7f00:1',
      '64:ff9b::a9fe:a9fe',
      '224.0.0.1',
    ];
    for (const a of internal) expect(isInternalAddress(a), a).toBe(true);
    for (const a of ['8.8.8.8', '104.16.0.1', '2606:4700::1', '::ffff:8.8.8.8']) expect(isInternalAddress(a), a).toBe(false);
    expect(usableAddresses(entry('*.example.com'), ['127.0.0.1', '93.184.216.34'])).toEqual(['93.184.216.34']);
    expect(usableAddresses(entry('example.com'), ['10.0.0.1'])).toEqual([]);
    expect(usableAddresses(entry('dev.local:8080'), ['10.0.0.1'])).toEqual(['10.0.0.1']);
  });

  it("takes the custom models' endpoints from droid's settings, defaulting the port by scheme", () => {
    const settings = {
      customModels: [{ baseUrl: 'http://127.0.0.1:4000/v1' }, { baseUrl: 'https://llm.corp.example/v1' }, { baseUrl: 'ftp://x' }, {}],
      custom_models: [{ base_url: 'http://[::1]:9/v1' }],
    };
    expect(modelEntries(settings).map((e) => `${e.host}:${e.port}`)).toEqual(['127.0.0.1:4000', 'llm.corp.example:443', '::1:9']);
    expect(modelEntries(null)).toEqual([]);
    expect(entryOfUrl('not a url', 'model')).toBeNull();
  });
});
