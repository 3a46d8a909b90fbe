// Package logtest records what code under test logs, for tests that assert how often something
// was logged (a failure logged once, not once per retry).
package logtest
