// Package textsafe makes text that came from elsewhere (cluster and policy names, the hub's
// messages, what agents and Kyverno report) safe to show: every character a terminal acts on or
// that reorders what is shown is replaced by a visible escape. The CLI's tables and the web view
// both show such text through it, so a hostile cluster can neither drive a terminal nor make a
// page read differently from what it says.
package textsafe
