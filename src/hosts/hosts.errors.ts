import { AppError } from '../http/errors.ts';

export const capacityExhausted = (size: string) =>
  new AppError(409, 'capacity_exhausted', `No host has room for a ${size} machine now. Try again later or with a smaller size, or stop machines you no longer use.`);
