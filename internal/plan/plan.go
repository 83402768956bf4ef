// Package plan holds the decisions of the reconcilers as pure functions:
// what to do with a sandbox's container, how an attempt's end maps to a
// Run's outcome, and a ticket's next step. The controllers only carry them
// out.
package plan
