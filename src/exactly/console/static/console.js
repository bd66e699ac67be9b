// exactly console: refresh <main id="live"> without reloading the page. Every data-refresh-ms it fetches
// the same address with X-Console-Fragment: 1 (the server answers the inside of <main> only) and swaps it
// in; it skips a turn while the tab is hidden, the "pause" box is ticked or the last fetch is still out.
(function () {
  "use strict";
  var live = document.getElementById("live");
  if (!live) {
    return;
  }
  var status = document.getElementById("status");
  var pause = document.getElementById("pause");
  var every = Number(live.getAttribute("data-refresh-ms")) || 2000;
  var busy = false;

  function show(text, bad) {
    if (status) {
      status.textContent = text;
      status.className = bad ? "status bad" : "status";
    }
  }

  function tick() {
    if (busy || document.hidden || (pause && pause.checked)) {
      return;
    }
    busy = true;
    fetch(window.location.pathname + window.location.search, {
      headers: { "X-Console-Fragment": "1" },
      credentials: "same-origin",
      cache: "no-store",
    })
      .then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.text();
      })
      .then(function (html) {
        live.innerHTML = html;
        live.setAttribute("data-updated", String(Date.now()));
        show("live · " + new Date().toLocaleTimeString(), false);
      })
      .catch(function (error) {
        show("not updating: " + error.message, true);
      })
      .then(function () {
        busy = false;
      });
  }

  window.setInterval(tick, every);
})();
