import { Type } from 'typebox';
import { Timestamp } from '../http/schemas.ts';
import { FORK_LIMITS } from './forks.service.ts';
import { MachineName, MACHINE_LIMITS } from './machines.schemas.ts';

/** What the template and fork routes take and answer; the platform MCP tools take the same bodies (machines.mcp.ts). */

const strict = { additionalProperties: false } as const;

export const TemplateSchema = Type.Object({
  id: Type.String({ description: 'tpl_…' }),
  name: Type.String(),
  sizeBytes: Type.Integer({ description: 'The size of its disk as the host keeps it (with Docker, the image’s, its base image included); 0 on the simulated host, whose machines have no disk' }),
  createdAt: Timestamp,
  sourceMachineId: Type.String({ description: 'The machine it was saved from' }),
});

export const CreateTemplateBody = Type.Object(
  {
    machineId: Type.String({ minLength: 1, maxLength: MACHINE_LIMITS.id, description: 'The machine (running, paused or stopped) whose disk to save; a running one is frozen for the copy' }),
    name: Type.String({ minLength: 1, maxLength: MACHINE_LIMITS.name, description: 'Unique in the account; POST /api/machines {template} takes it as well as the id' }),
  },
  strict,
);

export const ForkBody = Type.Object(
  {
    count: Type.Integer({ minimum: FORK_LIMITS.min, maximum: FORK_LIMITS.max, description: `How many machines to make (${FORK_LIMITS.min}–${FORK_LIMITS.max})` }),
    name: Type.Optional({ ...MachineName, description: 'The new machine’s name (name-1…name-N for several); default: the source’s name and -fork' }),
  },
  strict,
);

