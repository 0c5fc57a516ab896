/** An error answer of the emulated API: a status plus the documented error envelope. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly param?: string,
    /** Extra members of the error object, such as required_credits on a 402. */
    readonly extra: Record<string, number> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }
}

export const invalidParameter = (param: string, message: string) => new ApiError(400, 'invalid_parameter', message, param);
export const missingParameter = (param: string) =>
  new ApiError(400, 'missing_parameter', `the ${param} parameter is required`, param);
