"""The one writer: changes to a running host, shown first, journalled, undoable.

* :mod:`~topoagent.features.act.changes` -- what a change is, and the pure planning of the changes
  (current -> proposed) for process affinity, IRQ affinity, ACS and peer memory;
* :mod:`~topoagent.features.act.writer` -- :class:`HostWriter`, the only code that writes to the host,
  rooted like :class:`~topoagent.core.hostfs.HostFS` (a fake ``/proc/irq`` in tests);
* :mod:`~topoagent.features.act.journal` -- the undo journal in the state directory: each change's
  undo record is written *before* the change is made;
* :mod:`~topoagent.features.act.execute` -- make changes (journal, write, read back) and undo them.

Reading the current state is a read: it lives in :mod:`topoagent.core.read` (irqs, process,
kernel).  ``scan`` never imports this package; the daemon takes only its atomic file
writes (:mod:`~topoagent.core.write.files`) and the default state directory from it.
"""
