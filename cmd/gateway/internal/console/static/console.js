// The console's only script: live refresh of the overview, progress for a
// bulk replay. Every action also works without it, as a plain form.
(function () {
  "use strict";
  var csrf = (document.querySelector('meta[name="csrf"]') || {}).content || "";

  var live = document.getElementById("live");
  if (live && live.dataset.live) {
    setInterval(function () {
      fetch(live.dataset.live, { headers: { "X-Console-Fetch": "1" }, credentials: "same-origin" })
        .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
        .then(function (html) {
          // The fragment is rendered by html/template on our own server,
          // with every value escaped; it is parsed inertly before use.
          var doc = new DOMParser().parseFromString(html, "text/html");
          live.replaceChildren.apply(live, Array.prototype.slice.call(doc.body.childNodes));
        })
        .catch(function () {});
    }, 5000);
  }

  var form = document.getElementById("bulk-form");
  if (form) {
    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      var items = Array.prototype.slice.call(document.querySelectorAll("#bulk-targets li"));
      var bar = document.getElementById("bulk-progress");
      var status = document.getElementById("bulk-status");
      document.getElementById("bulk-progress-wrap").hidden = false;
      document.getElementById("bulk-confirm").disabled = true;
      var done = 0, skipped = 0;
      var next = function () {
        if (items.length === 0) {
          status.textContent = "Replayed " + done + " event(s)" + (skipped ? ", " + skipped + " skipped (being delivered or gone)" : "") + ".";
          status.id = "bulk-finished";
          return;
        }
        var li = items.shift();
        var body = new URLSearchParams({ source: li.dataset.source, event_id: li.dataset.event, scope: li.dataset.scope });
        fetch("/event/replay", { method: "POST", body: body, credentials: "same-origin",
          headers: { "X-CSRF-Token": csrf, "X-Console-Fetch": "1" } })
          .then(function (r) { if (r.ok) { done++; } else { skipped++; } })
          .catch(function () { skipped++; })
          .then(function () {
            bar.value = done + skipped;
            status.textContent = (done + skipped) + " of " + bar.max;
            next();
          });
      };
      next();
    });
  }
})();
