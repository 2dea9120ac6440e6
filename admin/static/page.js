// Live updates for the status page: every 5 s, fetch the page again and
// swap in its live region, unless updates are switched off, the tab is
// hidden, or the pointer is in a form (a row's buttons would move).
(function () {
  "use strict";
  var box = document.getElementById("live");
  var note = document.getElementById("live-note");
  var every = 5000;

  // The message of an action shows once: reloads show the plain page.
  var u = new URL(location.href);
  if (u.searchParams.has("done")) {
    u.searchParams.delete("done");
    u.searchParams.delete("host");
    history.replaceState(null, "", u.pathname + u.search);
  }

  function busy() {
    var a = document.activeElement;
    return a && a !== document.body && a.closest && a.closest("#live-region form");
  }

  function tick() {
    if (!box.checked || document.hidden || busy()) {
      return;
    }
    fetch(location.href, { headers: { Accept: "text/html" }, cache: "no-store", credentials: "same-origin" })
      .then(function (r) {
        if (!r.ok) { throw new Error("HTTP " + r.status); }
        return r.text();
      })
      .then(function (text) {
        var doc = new DOMParser().parseFromString(text, "text/html");
        var fresh = doc.getElementById("live-region");
        var old = document.getElementById("live-region");
        if (fresh && old) {
          old.replaceWith(document.adoptNode(fresh));
          document.title = doc.title;
        }
        note.textContent = "";
      })
      .catch(function (e) {
        note.textContent = "update failed (" + e.message + "); retrying";
      });
  }

  box.addEventListener("change", function () {
    note.textContent = box.checked ? "" : "paused";
    if (box.checked) { tick(); }
  });
  setInterval(tick, every);
})();
