"""The one writer's primitives: files written only inside a directory fd, never through a
link, never over a device or FIFO (:mod:`.beneath`, :mod:`.files`).  Acting on the host
(IRQs, affinity, ACS, modules) is the ``act`` feature's, over these."""
