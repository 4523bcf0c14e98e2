import { Type, type Static } from 'typebox';
import { PROBLEM_TITLES } from './errors.ts';

export const ProblemSchema = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    code: Type.String(),
  },
  { description: 'RFC 9457 problem details' },
);

export type Problem = Static<typeof ProblemSchema>;

export const PROBLEM_CONTENT_TYPE = 'application/problem+json; charset=utf-8';

export function problemTypeUri(publicUrl: string, code: string): string {
  return `${publicUrl}/docs/errors#${code}`;
}

export function buildProblem(publicUrl: string, status: number, code: string, detail: string): Problem {
  return { type: problemTypeUri(publicUrl, code), title: PROBLEM_TITLES[code] ?? 'Error', status, detail, code };
}
