// policyhub's view: follow the hub's changes without a reload. The server sends the topics that
// changed (Server-Sent Events); when the page shows one of them, its <main> is fetched again and
// replaced, keeping focus, scroll and open <details>. Without this script the pages are whole:
// reload to see changes.
(function () {
  "use strict";
  var main = document.getElementById("main");
  var live = document.getElementById("live");
  if (!main || !window.EventSource || !window.fetch) return;
  live.textContent = "Live";
  var watch = (main.getAttribute("data-watch") || "").split(" ").filter(Boolean);
  var busy = false, again = false;

  function follows(topics) {
    for (var i = 0; i < topics.length; i++) {
      if (topics[i] === "*") return true;
      for (var j = 0; j < watch.length; j++) {
        if (watch[j] === "*" || topics[i].indexOf(watch[j]) === 0) return true;
      }
    }
    return false;
  }

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.href, { headers: { "X-Policyhub-Fragment": "main" }, credentials: "same-origin", cache: "no-store" })
      .then(function (r) {
        if (!r.ok) throw new Error("HTTP " + r.status);
        return r.text();
      })
      .then(function (html) {
        var focused = document.activeElement && document.activeElement.id;
        var open = Array.prototype.map.call(main.querySelectorAll("details[open][id]"), function (d) { return d.id; });
        var x = window.scrollX, y = window.scrollY;
        main.innerHTML = html;
        open.forEach(function (id) { var d = document.getElementById(id); if (d) d.open = true; });
        if (focused) { var f = document.getElementById(focused); if (f) f.focus(); }
        window.scrollTo(x, y);
        main.setAttribute("data-updated", String(Number(main.getAttribute("data-updated") || "0") + 1));
        live.textContent = "Updated " + new Date().toLocaleTimeString();
      })
      .catch(function (err) { live.textContent = "Could not update (" + err.message + "): reload to retry"; })
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }

  var events = new EventSource("/events");
  events.addEventListener("changed", function (e) {
    var topics;
    try { topics = JSON.parse(e.data); } catch (_) { return; }
    if (follows(topics)) refresh();
  });
  events.onerror = function () {
    // A refused stream (too many open: 429) is closed for good; a broken one reconnects.
    live.textContent = events.readyState === EventSource.CLOSED ? "Live updates off (too many open tabs?): reload to retry" : "Reconnecting…";
  };
  events.onopen = function () { live.textContent = "Live"; };
})();
