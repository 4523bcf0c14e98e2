// A machine's settings on its page (PATCH /api/machines/{id}): its idle stop.
// One form, so that settings added later join it.
import { api } from '../api.js';
import { h } from '../dom.js';
import { field, simpleForm } from '../forms.js';
import { card } from '../layout.js';
import { toast } from '../toast.js';

/** `autoStopMinutes` from 0 (never) to a week. */
export const AUTO_STOP_MAX = 10080;

/**
 * The idle-stop field of the create dialog and of the machine's settings.
 * @param {{ value?: number, optional?: boolean }} [options]
 */
export function autoStopField({ value, optional = false } = {}) {
  const minutes = field({
    label: 'Stop when idle for (minutes)',
    name: 'autoStopMinutes',
    type: 'number',
    inputmode: 'numeric',
    optional,
    placeholder: optional ? '15' : undefined,
    value: value === undefined ? undefined : String(value),
    hint: `Stopped (its disk kept) after this long without use: requests to it, its terminal, screen or previews, or a run. A background process alone does not count. 0: never; at most ${AUTO_STOP_MAX} (a week)${optional ? '; empty: the service’s default, 15' : ''}.`,
  });
  minutes.input.min = '0';
  minutes.input.max = String(AUTO_STOP_MAX);
  minutes.input.step = '1';
  return minutes;
}

/**
 * @param {import('./machines.js').Machine} machine
 * @param {() => Promise<void>} saved  reads the machine again
 */
export function settingsSection(machine, saved) {
  const path = `/api/machines/${encodeURIComponent(machine.id)}`;
  const minutes = autoStopField({ value: machine.autoStopMinutes ?? 15 });
  const { form } = simpleForm({
    label: 'Machine settings',
    fields: [minutes.wrapper],
    submitLabel: 'Save settings',
    onSubmit: async () => {
      /** @type {import('./machines.js').Machine} */
      const changed = await api('PATCH', path, { autoStopMinutes: Number(minutes.input.value) });
      minutes.input.value = String(changed.autoStopMinutes);
      toast(changed.autoStopMinutes === 0 ? `${changed.name} never stops for idleness.` : `${changed.name} stops after ${changed.autoStopMinutes} idle minutes.`);
      await saved();
    },
  });
  const element = card({
    title: 'Settings',
    id: 'machine-settings',
    description: h('span', null, 'Idle stop: a running machine nobody uses is stopped, with ', h('code', null, 'machine.stopped'), ' reason ', h('code', null, 'idle'), '. A paused machine is never idle-stopped.'),
  }, form);
  return { element };
}
