"""The application's plumbing below its commands: configuration and profiles, the output folder's lock and
publication, shards, progress, the console and crash reports. The commands (:mod:`audit.commands`) use it; the
engine and the reporters never do."""
