// Package archivetest writes the gzipped tarballs the tests of the source readers feed them:
// Flux artifacts and policy bundle layers as their producers write them, and gzip bombs.
package archivetest
