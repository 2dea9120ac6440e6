package spool

// KeptSynced is testKeptSynced, for the journal's run of it
// (durable_journal_linux_test.go).
var KeptSynced = testKeptSynced
