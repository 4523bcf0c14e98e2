// A machine's network policy: the fields of the create dialog,
// and the machine page's section that shows and changes it (PATCH, applied
// at once to a running machine).
import { api } from '../api.js';
import { h, replace } from '../dom.js';
import { field, simpleForm } from '../forms.js';
import { card } from '../layout.js';
import { toast } from '../toast.js';

/** @typedef {{ internet: boolean, allow: string[], deny: string[] }} NetworkPolicy */

const MAX_ENTRIES = 50;

/** One entry per line (or comma), blanks dropped. @param {string} text */
export function parseEntries(text) {
  return text.split(/[\n,]/).map((entry) => entry.trim()).filter((entry) => entry !== '');
}

/**
 * The policy's fields: the internet open or shut, what is allowed when it is
 * shut, the ranges denied. The service checks every entry; here only the count.
 * @param {NetworkPolicy | null} current  null: the service's default (open)
 */
export function networkFields(current) {
  const modeId = `network-mode-${Math.random().toString(36).slice(2, 8)}`;
  const mode = /** @type {HTMLSelectElement} */ (h('select', { id: modeId, name: 'internet', class: 'select', 'data-network-mode': '' },
    h('option', { value: 'open' }, 'Open: every public address'),
    h('option', { value: 'listed' }, 'Only what is allowed below')));
  mode.value = current === null || current.internet ? 'open' : 'listed';
  const allow = field({ label: 'Allowed', name: 'allow', optional: true, multiline: true, mono: true, value: (current?.allow ?? []).join('\n'), placeholder: 'pypi.org\n*.pythonhosted.org\n203.0.113.0/24',
    hint: 'One domain (*.example.org for the names under it) or IPv4 CIDR per line. A domain resolves, and its addresses are reachable, only when listed.' });
  const deny = field({ label: 'Denied', name: 'deny', optional: true, multiline: true, mono: true, value: (current?.deny ?? []).join('\n'), placeholder: '198.51.100.0/24',
    hint: 'IPv4 CIDRs the machine may never reach. Private and loopback addresses are never reachable anyway.' });
  for (const input of [allow.input, deny.input]) input.setAttribute('spellcheck', 'false');
  const count = () => {
    const total = (mode.value === 'listed' ? parseEntries(allow.input.value).length : 0) + parseEntries(deny.input.value).length;
    deny.input.setCustomValidity(total > MAX_ENTRIES ? `At most ${MAX_ENTRIES} entries in all (${total} now).` : '');
  };
  const showAllow = () => {
    allow.wrapper.hidden = mode.value !== 'listed';
    count();
  };
  mode.addEventListener('change', showAllow);
  allow.input.addEventListener('input', count);
  deny.input.addEventListener('input', count);
  showAllow();
  const wrapper = h('div', { class: 'stack', 'data-network-fields': '' },
    h('div', { class: 'field' }, h('label', { for: modeId }, 'Internet'), mode),
    allow.wrapper, deny.wrapper);
  return {
    wrapper,
    /** @returns {NetworkPolicy} */
    read: () => mode.value === 'listed'
      ? { internet: false, allow: parseEntries(allow.input.value), deny: parseEntries(deny.input.value) }
      : { internet: true, allow: [], deny: parseEntries(deny.input.value) },
  };
}

/** The policy in a line. @param {NetworkPolicy | null} policy */
export function describePolicy(policy) {
  if (policy === null) return 'Internet open (the service’s default).';
  const denied = policy.deny.length > 0 ? ` Denied: ${policy.deny.join(', ')}.` : '';
  if (policy.internet) return `Internet open.${denied}`;
  if (policy.allow.length === 0) return `No way out.${denied}`;
  return `Only ${policy.allow.join(', ')}.${denied}`;
}

/**
 * The machine page's network section: the policy, and a form that changes it.
 * @param {{ id: string, network?: NetworkPolicy | null }} machine
 */
export function networkSection(machine) {
  const path = `/api/machines/${encodeURIComponent(machine.id)}`;
  const summary = h('p', { 'data-network-summary': '' });
  const body = h('div');
  let policy = machine.network ?? null;
  const edit = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'btn' }, 'Change'));
  const element = card({ title: 'Network', id: 'network', description: 'Where the machine may connect. A change holds at once, without a restart.', actions: [edit] }, h('div', { class: 'card__body' }, summary, body));
  const show = () => {
    summary.textContent = describePolicy(policy);
    replace(body);
    edit.hidden = false;
  };
  edit.addEventListener('click', () => {
    edit.hidden = true;
    const fields = networkFields(policy);
    const { form } = simpleForm({
      label: 'Network policy',
      fields: [fields.wrapper],
      submitLabel: 'Save policy',
      secondary: h('button', { type: 'button', class: 'btn', onclick: show }, 'Cancel'),
      onSubmit: async () => {
        const updated = await api('PATCH', path, { network: fields.read() });
        policy = updated.network;
        show();
        toast('Network policy saved.');
      },
    });
    replace(body, form);
    /** @type {HTMLElement | null} */ (form.querySelector('select'))?.focus();
  });
  show();
  return {
    element,
    /** @param {string} status */
    setStatus(status) {
      edit.disabled = status === 'destroyed';
    },
  };
}

