// Templates and forks (issue 41): the account's templates (size, delete) on the
// machines page, "Save as template" and "Fork" on a machine's page, and the
// template choice in the create dialog.
import { api, listAll, messageOf } from '../api.js';
import { confirmAction, openDialog } from '../dialog.js';
import { alertBox, cell, h, loading, replace, table } from '../dom.js';
import { formatBytes, timeElement } from '../format.js';
import { field, simpleForm } from '../forms.js';
import { card } from '../layout.js';
import { toast } from '../toast.js';

/**
 * @typedef {object} Template
 * @property {string} id
 * @property {string} name
 * @property {number} sizeBytes
 * @property {string} createdAt
 * @property {string} sourceMachineId
 */

/** Machines one fork makes. */
const FORK_MAX = 10;

/** What a template weighs, said plainly where the host keeps no disk (the simulated one). @param {Template} template */
function sizeOf(template) {
  return template.sizeBytes > 0 ? formatBytes(template.sizeBytes) : 'Empty';
}

/**
 * The account's templates with their sizes, each with Delete; `refresh()` reads them again.
 * @returns {{ element: HTMLElement, refresh: () => Promise<void> }}
 */
export function templatesCard() {
  const body = h('div', null, loading('Loading templates…'));
  async function refresh() {
    /** @type {Template[]} */
    let templates;
    try {
      templates = await listAll('/api/templates');
    } catch (error) {
      replace(body, h('div', { class: 'card__footer' }, alertBox('error', messageOf(error))));
      return;
    }
    replace(body, templates.length === 0
      ? h('div', { class: 'empty' }, h('h3', null, 'No templates yet'), h('p', null, 'Save a machine as a template from its page (“Save as template”); new machines can then start with its files.'))
      : table('Templates', ['Template', 'Size', 'Created', ''], templates.map((template) => row(template, refresh))));
  }
  refresh();
  return { element: card({ title: 'Templates', id: 'templates', flush: true }, body), refresh };
}

/** @param {Template} template @param {() => Promise<void>} refresh */
function row(template, refresh) {
  const remove = h('button', { type: 'button', class: 'btn btn--small btn--danger-outline', 'aria-label': `Delete template ${template.name}` }, 'Delete');
  remove.addEventListener('click', async () => {
    const deleted = await confirmAction({
      title: `Delete template ${template.name}?`,
      message: 'Its saved disk is deleted. Machines made from it keep their files. A template a warm pool uses cannot be deleted.',
      confirmLabel: 'Delete template',
      danger: true,
      action: () => api('DELETE', `/api/templates/${encodeURIComponent(template.id)}`),
    });
    if (!deleted) return;
    toast(`Template ${template.name} deleted.`);
    await refresh();
  });
  return h('tr', { dataset: { templateId: template.id } },
    h('td', { class: 'table__main' },
      h('div', { class: 'table__primary' }, template.name),
      h('div', { class: 'table__secondary mono' }, template.id, ' · from ', h('a', { href: `/machines/${encodeURIComponent(template.sourceMachineId)}` }, template.sourceMachineId))),
    cell('Size', template.sizeBytes > 0 ? formatBytes(template.sizeBytes) : h('span', { title: 'This host keeps no disks: machines from it start empty' }, 'Empty')),
    cell('Created', timeElement(template.createdAt)),
    h('td', { class: 'table__actions' }, h('div', { class: 'actions' }, remove)));
}

/**
 * The "Template" choice of the create dialog: shown only when the account has
 * templates; `value()` is the chosen id or null. `onChange` hears the choice
 * (the image choice does not apply to a template).
 * @param {(templateId: string | null) => void} onChange
 */
export function templateChoice(onChange) {
  const id = 'machine-template';
  const select = /** @type {HTMLSelectElement} */ (h('select', { id, name: 'template', class: 'select' }, h('option', { value: '' }, 'None')));
  const wrapper = h('div', { class: 'field', hidden: true, 'data-template-field': '' }, h('label', { for: id }, 'Template'), select,
    h('div', { class: 'field__hint' }, 'Start with the files of a saved machine.'));
  listAll('/api/templates').then((/** @type {Template[]} */ templates) => {
    if (templates.length === 0) return;
    replace(select, h('option', { value: '' }, 'None'), ...templates.map((template) => h('option', { value: template.id }, `${template.name} · ${sizeOf(template)}`)));
    wrapper.hidden = false;
  }, () => {});
  select.addEventListener('change', () => onChange(select.value || null));
  return { wrapper, value: () => select.value || null };
}

/**
 * Saves the machine's disk as a template, named in the dialog.
 * @param {{ id: string, name: string, status: string }} machine
 */
export function openSaveTemplateDialog(machine) {
  const name = field({ label: 'Template name', name: 'name', required: true, maxlength: 100, value: machine.name });
  name.input.setAttribute('data-autofocus', '');
  const { form } = simpleForm({
    label: 'Save as template',
    fields: [
      h('p', null, machine.status === 'running'
        ? 'The machine’s disk is copied as it is now; it is frozen for the moment of the copy and then goes on.'
        : 'The machine’s disk is copied as it is now.'),
      name.wrapper,
    ],
    submitLabel: 'Save template',
    secondary: h('button', { type: 'button', class: 'btn', onclick: () => dialog.close() }, 'Cancel'),
    onSubmit: async () => {
      /** @type {Template} */
      const template = await api('POST', '/api/templates', { machineId: machine.id, name: name.input.value.trim() });
      dialog.close();
      toast(`Saved template ${template.name} (${sizeOf(template)}).`);
    },
  });
  const dialog = openDialog({ title: `Save ${machine.name} as a template`, content: [form] });
}

/**
 * Makes new machines from the machine's disk, as many as asked (1–10), and lists them.
 * @param {{ id: string, name: string }} machine
 */
export function openForkDialog(machine) {
  const count = field({ label: 'How many machines', name: 'count', type: 'number', required: true, value: '1', hint: `From 1 to ${FORK_MAX}.` });
  count.input.min = '1';
  count.input.max = String(FORK_MAX);
  count.input.setAttribute('data-autofocus', '');
  const name = field({ label: 'Name', name: 'name', optional: true, maxlength: 100, placeholder: `${machine.name}-fork`, hint: 'Several machines are numbered: name-1, name-2, …' });
  const { form } = simpleForm({
    label: 'Fork machine',
    fields: [h('p', null, 'Each new machine starts with this machine’s files, size, labels and environment.'), count.wrapper, name.wrapper],
    submitLabel: 'Fork',
    secondary: h('button', { type: 'button', class: 'btn', onclick: () => dialog.close() }, 'Cancel'),
    onSubmit: async () => {
      /** @type {Record<string, unknown>} */
      const input = { count: Number(count.input.value) };
      if (name.input.value.trim()) input.name = name.input.value.trim();
      /** @type {{ data: Array<{ id: string, name: string }> }} */
      const forked = await api('POST', `/api/machines/${encodeURIComponent(machine.id)}/fork`, input);
      dialog.setContent(
        alertBox('success', `${forked.data.length === 1 ? 'One machine is' : `${forked.data.length} machines are`} starting.`),
        h('ul', { class: 'list' }, forked.data.map((copy) => h('li', null, h('a', { href: `/machines/${encodeURIComponent(copy.id)}` }, copy.name)))),
        h('p', { class: 'field__hint' }, 'Give an agent one of them with “New MCP token” in the machine list.'),
        h('div', { class: 'dialog__footer' }, h('button', { type: 'button', class: 'btn btn--primary', onclick: () => dialog.close() }, 'Done')));
    },
  });
  const dialog = openDialog({ title: `Fork ${machine.name}`, content: [form] });
}
