// A hostile plugin in JavaScript for the sandbox tests: each `Attack` CR names a resource attack to run.

import { Desired, defineKind, invalidField, kinds, quote, reconciler, t } from '@operator-host/sdk';

// State a call leaves behind: a fresh instance per call must start from zero again.
let calls = 0;

const Attack = defineKind({
  group: 'hostile.operator-host.dev',
  version: 'v1alpha1',
  kind: 'Attack',
  plural: 'attacks',
  spec: t.object(
    {
      attack: t.string({ description: 'Which attack the next reconcile runs.' }),
      count: t.integer({ format: 'int64', default: 0 }),
    },
    { required: ['attack'] },
  ),
});

function reconcile(parent) {
  calls += 1;
  const desired = new Desired();
  const { attack, count } = parent.spec;
  if (attack === 'none') {
    desired.setStatus({ attack: 'none' });
  } else if (attack === 'loop') {
    for (;;) {}
  } else if (attack === 'memory') {
    const hoard = [];
    for (;;) hoard.push(new Uint8Array(1 << 20).fill(1));
  } else if (attack === 'big-response') {
    desired.setStatus({ blob: 'x'.repeat(Number(count)) });
  } else if (attack === 'counter') {
    desired.setStatus({ calls });
  } else {
    throw invalidField('attack', `unknown attack ${quote(attack)}`);
  }
  return desired;
}

export const plugin = reconciler({
  name: 'hostile',
  version: '0.1.0',
  parent: Attack,
  children: [kinds.ConfigMap],
  reconcile,
});
