// Live approvals: when the queue changes, reload the pending list. The
// page works without this script; it only saves a reload.
(function () {
  var box = document.getElementById("pending");
  if (!box || !window.EventSource) { return; }
  var src = new EventSource(box.getAttribute("data-live"));
  src.addEventListener("changed", function () {
    fetch(box.getAttribute("data-src"), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) { box.innerHTML = html; })
      .catch(function () {});
  });
})();

// Live try-a-call: Run streams the call (POST .../stream) and shows the
// tool's output as it comes, then the result section. Without this
// script the form posts and the page shows the result when the call ends.
(function () {
  var form = document.getElementById("try");
  var live = document.getElementById("live");
  var box = document.getElementById("result-box");
  if (!form || !live || !box || !window.fetch || !window.TextDecoder || !window.URLSearchParams) { return; }
  form.addEventListener("submit", function (ev) {
    if (!ev.submitter || ev.submitter.value !== "run") { return; } // a dry run: the plain form
    ev.preventDefault();
    var body = new URLSearchParams(new FormData(form));
    body.set("action", "run");
    live.textContent = "";
    live.hidden = false;
    box.innerHTML = "";
    fetch(form.getAttribute("data-stream"), { method: "POST", body: body, credentials: "same-origin" })
      .then(function (resp) {
        if (!resp.ok || !resp.body) { return resp.text().then(function (t) { live.textContent = t; }); }
        var reader = resp.body.getReader(), dec = new TextDecoder(), buf = "";
        function handle(line) {
          var e = JSON.parse(line);
          if (e.event === "stdout" || e.event === "stderr") {
            live.textContent += e.data;
          } else if (e.event === "result") {
            box.innerHTML = e.html;
            live.hidden = true;
          }
        }
        function pump() {
          return reader.read().then(function (r) {
            if (r.done) { return; }
            buf += dec.decode(r.value, { stream: true });
            var i;
            while ((i = buf.indexOf("\n")) >= 0) {
              var line = buf.slice(0, i);
              buf = buf.slice(i + 1);
              if (line) { handle(line); }
            }
            return pump();
          });
        }
        return pump();
      })
      .catch(function (err) { live.textContent += "\n" + err; });
  });
})();
