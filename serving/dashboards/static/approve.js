// Approve button of the plan page: POST /v1/plans/{id}/approve with the pasted bearer
// token (kept in sessionStorage, i.e. this tab only) and show what the API answered.
(function () {
  "use strict";
  var KEY = "predops.token";
  var card = document.getElementById("approve-card");
  if (!card) { return; }
  var form = document.getElementById("approve-form");
  var input = document.getElementById("token");
  var out = document.getElementById("approve-result");
  var planId = card.getAttribute("data-plan-id");
  var saved = window.sessionStorage.getItem(KEY);
  if (saved) { input.value = saved; }

  function show(ok, title, body) {
    out.className = ok ? "result ok" : "result fail";
    out.textContent = "";
    var b = document.createElement("strong");
    b.textContent = title;
    out.appendChild(b);
    if (body) {
      var pre = document.createElement("pre");
      pre.textContent = body;
      out.appendChild(pre);
    }
  }

  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    var token = input.value.trim();
    if (!token) { show(false, "Paste a token first."); return; }
    window.sessionStorage.setItem(KEY, token);
    var button = document.getElementById("approve");
    button.disabled = true;
    show(true, "Approving…");
    fetch("/v1/plans/" + encodeURIComponent(planId) + "/approve", {
      method: "POST",
      headers: { "Authorization": "Bearer " + token, "Content-Type": "application/json" },
      body: "{}"
    }).then(function (resp) {
      return resp.text().then(function (text) {
        var body = text;
        try { body = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { /* not JSON */ }
        if (resp.ok) {
          show(true, "Approved: plan " + planId + " is approved.", body);
        } else {
          if (resp.status === 401 || resp.status === 403) { window.sessionStorage.removeItem(KEY); }
          show(false, "Not approved (HTTP " + resp.status + ").", body);
        }
      });
    }).catch(function (err) {
      show(false, "The API did not answer: " + err);
    }).finally(function () {
      button.disabled = false;
    });
  });
})();
