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
