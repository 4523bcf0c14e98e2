import type { Deps } from '../deps.ts';
import { invalidRequest } from '../http/errors.ts';
import { planComputerAction, type ComputerInput } from '../providers/computer-use.ts';
import { noDisplay, wrongStatus } from '../machines/machines.errors.ts';
import { screenOf, toProviderMachine } from '../machines/machines.repository.ts';
import { getMachineRow } from '../machines/machines.service.ts';
import { ActionRefused, type ComputerAnswer, type MachineProvider, type Screenshot } from '../providers/provider.ts';

/**
 * A running machine's display: a picture of it, and the
 * `computer` tool's actions on it.
 * @throws AppError 404 unknown machine, 409 invalid_state when not running, 409 no_display without a display.
 */
export async function takeScreenshot(deps: Deps, provider: MachineProvider, accountId: string, machineId: string): Promise<Screenshot> {
  const row = await getMachineRow(deps, accountId, machineId);
  if (row.status !== 'running') throw wrongStatus('show its screen', row.status);
  const screenshot = await provider.screen(toProviderMachine(row));
  if (screenshot === null) throw noDisplay();
  return screenshot;
}

/**
 * One computer-use action, answered with the screen after it (or the pointer's place).
 * @throws AppError 400 for an action that does not fit the screen or names no key, and as takeScreenshot.
 */
export async function actOnScreen(deps: Deps, provider: MachineProvider, accountId: string, machineId: string, input: ComputerInput): Promise<ComputerAnswer> {
  const row = await getMachineRow(deps, accountId, machineId);
  const plan = planComputerAction(input, screenOf(row));
  if (row.status !== 'running') throw wrongStatus('be used', row.status);
  if (provider.computer === undefined) throw noDisplay();
  try {
    const answer = await provider.computer(toProviderMachine(row), plan);
    if (answer === null) throw noDisplay();
    return answer;
  } catch (error) {
    if (error instanceof ActionRefused) throw invalidRequest(error.message);
    throw error;
  }
}
