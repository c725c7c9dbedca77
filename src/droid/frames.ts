/**
 * The stream-jsonrpc frame shapes droid 0.225.x speaks (see docs/PROTOCOL-NOTES.md).
 * Every frame carries `type` and `factoryApiVersion`; request ids are strings.
 */
import type { RpcErrorBody } from './errors.js';

const FACTORY_API_VERSION = '1.0.0';

export interface RequestFrame {
  jsonrpc: '2.0';
  type: 'request';
  factoryApiVersion: string;
  id: string;
  method: string;
  params: unknown;
}

export interface ResponseFrame {
  jsonrpc: '2.0';
  type: 'response';
  factoryApiVersion: string;
  id: string | null;
  result?: unknown;
  error?: RpcErrorBody;
}

export interface NotificationFrame {
  jsonrpc: '2.0';
  type: 'notification';
  factoryApiVersion: string;
  method: string;
  params: unknown;
}

export type Frame = RequestFrame | ResponseFrame | NotificationFrame;

export function requestFrame(id: string, method: string, params: unknown): RequestFrame {
  return { jsonrpc: '2.0', type: 'request', factoryApiVersion: FACTORY_API_VERSION, id, method, params };
}

export function resultFrame(id: string, result: unknown): ResponseFrame {
  return { jsonrpc: '2.0', type: 'response', factoryApiVersion: FACTORY_API_VERSION, id, result };
}

export function errorFrame(id: string, error: RpcErrorBody): ResponseFrame {
  return { jsonrpc: '2.0', type: 'response', factoryApiVersion: FACTORY_API_VERSION, id, error };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Classifies a parsed JSON value as a frame, or explains why it is not one.
 * Droid's own frames always have `type`; anything else is a diagnostic.
 */
export function classifyFrame(value: unknown): Frame | { invalid: string } {
  if (!isRecord(value)) return { invalid: 'not a JSON object' };
  const { type } = value;
  if (type === 'request') {
    if (typeof value.id !== 'string' || typeof value.method !== 'string') {
      return { invalid: 'request without string id or method' };
    }
    return value as unknown as RequestFrame;
  }
  if (type === 'response') {
    if (value.id !== null && typeof value.id !== 'string') return { invalid: 'response with non-string id' };
    if (value.error !== undefined) {
      if (!isRecord(value.error) || typeof value.error.code !== 'number') {
        return { invalid: 'response with malformed error' };
      }
    }
    return value as unknown as ResponseFrame;
  }
  if (type === 'notification') {
    if (typeof value.method !== 'string') return { invalid: 'notification without method' };
    return value as unknown as NotificationFrame;
  }
  return { invalid: 'frame without a known type' };
}
