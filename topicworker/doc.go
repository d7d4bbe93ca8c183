// Package topicworker is the topic worker of the topic exchange (issue 24,
// docs/topics-cli.md): it runs a command once per claimed message (the
// body on stdin, the metadata as DUCTILE_META_* variables, in a process
// group of its own, killed whole at the timeout), maps how it ended to a
// follow-up (success topic with stdout, failure topic with stderr, or
// <topic>.timed_out), and loops claiming messages of one topic for one
// worker group on an Exchange: the local ledger's engine, or a daemon's
// HTTP API.
package topicworker
