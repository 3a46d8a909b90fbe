// Package securitydoc checks docs/security.md against the code: every promise there names the
// tests that prove it, and a test moved or renamed without the table following would leave a
// promise citing nothing. Its test fails on a cited test that does not exist where cited.
package securitydoc
