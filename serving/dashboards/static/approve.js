// Approve and apply buttons of the plan page: POST /v1/plans/{id}/approve or /apply
// with the pasted bearer token (kept in sessionStorage, i.e. this tab only), render what
// the API answered (who approved, each action's apply outcome; the API's error message
// when refused), then reload the page's audit trail card.
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

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) { e.textContent = String(text); }
    if (cls) { e.className = cls; }
    return e;
  }

  function show(ok, title, parts) {
    out.className = ok ? "result ok" : "result fail";
    out.textContent = "";
    out.appendChild(el("strong", title));
    (parts || []).forEach(function (p) { out.appendChild(p); });
  }

  function when(iso) {
    if (!iso) { return "—"; }
    var m = /^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2})/.exec(String(iso));
    return m ? m[1] + " " + m[2] + " UTC" : String(iso);
  }

  function table(headers, rows) {
    var t = el("table", null, "data result-table");
    var head = el("thead");
    var tr = el("tr");
    headers.forEach(function (h) { tr.appendChild(el("th", h)); });
    head.appendChild(tr);
    t.appendChild(head);
    var body = el("tbody");
    rows.forEach(function (r) {
      var row = el("tr");
      r.forEach(function (c) { row.appendChild(el("td", c)); });
      body.appendChild(row);
    });
    t.appendChild(body);
    return t;
  }

  function approved(body) {
    var a = body.approval || {};
    var p = el("p", "Approved by " + (a.approved_by || "?") + (a.role ? " (" + a.role + ")" : "") +
      " at " + when(a.approved_at) + (a.comment ? ": " + a.comment : "") + ". Nothing was applied.");
    return [p];
  }

  function applied(body) {
    var counts = body.counts || {};
    var words = Object.keys(counts).sort().map(function (k) {
      return k.replace(/_/g, " ") + " × " + counts[k];
    });
    var mode = body.mode === "execute" ? "executed" : "dry-run (nothing touched)";
    var parts = [el("p", "Mode: " + mode + "; state read from " + (body.state || "?") +
      ". Outcomes: " + (words.length ? words.join(", ") : "no actions") + ".")];
    var rows = (body.actions || []).map(function (a) {
      return [a.kind, a.target, a.outcome.replace(/_/g, " "), a.reason || a.why || "", a.detail || ""];
    });
    if (rows.length) {
      parts.push(table(["kind", "target", "outcome", "reason", "detail"], rows));
    }
    if ((body.problems || []).length) {
      parts.push(el("p", body.problems.length + " action(s) failed or had no actuator.", "bad"));
    }
    return parts;
  }

  function refused(status, text) {
    var message = text;
    try {
      var j = JSON.parse(text);
      message = j.error || text;
      if (j.field) { message += " (" + j.field + ")"; }
    } catch (e) { /* not JSON: show the text */ }
    return [el("p", message)];
  }

  function refreshAudit() {
    var audit = document.getElementById("audit-card");
    if (!audit) { return Promise.resolve(); }
    return fetch(audit.getAttribute("data-src"), { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (html) {
        audit.innerHTML = html;  // server-rendered, autoescaped fragment
        audit.setAttribute("data-refreshed", String(Date.now()));
      })
      .catch(function () { /* the page's trail stays as it was; a reload shows it */ });
  }

  function call(what, verb, done, button) {
    var token = input.value.trim();
    if (!token) { show(false, "Paste a token first."); return; }
    window.sessionStorage.setItem(KEY, token);
    button.disabled = true;
    show(true, verb + "…");
    fetch("/v1/plans/" + encodeURIComponent(planId) + "/" + what, {
      method: "POST",
      headers: { "Authorization": "Bearer " + token, "Content-Type": "application/json" },
      body: what === "approve" ? "{}" : undefined
    }).then(function (resp) {
      return resp.text().then(function (text) {
        if (resp.ok) {
          var body = {};
          try { body = JSON.parse(text); } catch (e) { /* keep empty */ }
          show(true, done + ": plan " + planId + ".", what === "approve" ? approved(body) : applied(body));
        } else {
          if (resp.status === 401 || resp.status === 403) { window.sessionStorage.removeItem(KEY); }
          show(false, "Not " + done.toLowerCase() + " (HTTP " + resp.status + ").", refused(resp.status, text));
        }
        return refreshAudit();
      });
    }).catch(function (err) {
      show(false, "The API did not answer: " + err);
    }).finally(function () {
      button.disabled = false;
    });
  }

  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    call("approve", "Approving", "Approved", document.getElementById("approve"));
  });
  var applyButton = document.getElementById("apply");
  if (applyButton) {
    applyButton.addEventListener("click", function () {
      call("apply", "Applying", "Applied", applyButton);
    });
  }
})();
