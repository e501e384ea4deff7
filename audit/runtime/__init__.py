"""What a check runs against: the run's options, the resolved target, the :class:`~audit.runtime.subject.Subject`
wrapping it, its randomness and global-state isolation, and the child processes (workers, ranks) that contain it."""
