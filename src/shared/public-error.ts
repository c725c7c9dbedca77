/**
 * Rejections a caller sees: a stable `code`, a message without private paths
 * or state, whether retrying may help, and what to do about it.
 */
export interface PublicError {
  code: string;
  message: string;
  retryable: boolean;
  action: string;
}

export class ControllerError extends Error implements PublicError {
  override readonly name = 'ControllerError';
  constructor(
    readonly code: string,
    message: string,
    readonly action: string,
    readonly retryable = false,
  ) {
    super(message);
  }

  toPublic(): PublicError {
    return { code: this.code, message: this.message, retryable: this.retryable, action: this.action };
  }
}
