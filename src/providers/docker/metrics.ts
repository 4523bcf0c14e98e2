import type { FastifyBaseLogger } from 'fastify';
import { AgentUnavailable } from '../agent/agent-client.ts';
import type { MetricSample, ProviderMachine } from '../provider.ts';
import type { AgentConnections } from './agent-connection.ts';

/**
 * The samples a machine's agent keeps of its use of resources (agent/API.md,
 * "Metrics"). The agent sees its disk's whole filesystem where the engine's
 * storage is btrfs (statfs does not tell a quota group): the machine's disk
 * limit, when the engine holds it to one, is the smaller of the two. A
 * machine whose agent does not answer yet (it is starting) has kept nothing.
 */
export function dockerMetrics(agents: AgentConnections, diskLimitOf: (machine: ProviderMachine) => number | null, logger: FastifyBaseLogger) {
  return async (machine: ProviderMachine, sinceMs: number): Promise<MetricSample[]> => {
    let samples: MetricSample[];
    try {
      samples = await (await agents.of(machine.id)).metrics(sinceMs);
    } catch (error) {
      if (!(error instanceof AgentUnavailable)) throw error;
      logger.debug({ err: error, machineId: machine.id }, 'no usage samples: the machine agent does not answer');
      return [];
    }
    const limit = diskLimitOf(machine);
    return limit === null ? samples : samples.map((sample) => ({ ...sample, diskLimitBytes: Math.min(sample.diskLimitBytes, limit) }));
  };
}
