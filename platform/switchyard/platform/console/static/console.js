// The console's own script: the usage chart (uPlot, vendored), copy buttons, the playground's live answer and the
// agent builder's checks and preview.
// No inline script anywhere.
(function () {
  "use strict";
  var COLORS = ["#1f6feb", "#d97706", "#059669", "#9333ea", "#dc2626", "#0891b2", "#65a30d", "#db2777"];

  function drawUsage() {
    var el = document.getElementById("usage-chart");
    var source = document.getElementById("usage-data");
    if (!el || !source || !window.uPlot || el.dataset.drawn) return;
    var data = JSON.parse(source.textContent);
    // Each bar stands on its day's noon (UTC), inside the day it counts, and the axis reads UTC days.
    var xs = data.days.map(function (d) { return Date.parse(d + "T12:00:00Z") / 1000; });
    // Stacked: each series is drawn as the running sum of itself and the ones before it; a series adding nothing
    // on a day draws nothing there (null), not a line on top of the others.
    var running = xs.map(function () { return 0; });
    var stacked = data.values.map(function (row) {
      running = running.map(function (sum, i) { return sum + row[i]; });
      return running.map(function (sum, i) { return row[i] > 0 ? sum : null; });
    });
    // Drawn from the top of the stack down, so each lower band's fill stays visible over the one above.
    var bars = window.uPlot.paths.bars({ size: [0.7, 60] });  // one bar a day
    var order = data.series.map(function (_, i) { return i; }).reverse();
    var series = [{ label: "Day (UTC)" }].concat(order.map(function (i) {
      var color = COLORS[i % COLORS.length];
      return { label: data.series[i], stroke: color, fill: color + "99", width: 1, paths: bars, points: { show: false } };
    }));
    var width = Math.max(280, el.clientWidth - 16 || 600);
    // A tick under each bar (every few bars when they are many), labelled with its UTC day.
    var every = Math.max(1, Math.ceil(xs.length / Math.floor(width / 64)));
    var ticks = xs.filter(function (_, i) { return (xs.length - 1 - i) % every === 0; });
    var MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    function day(ts) { var d = new Date(ts * 1000); return MONTHS[d.getUTCMonth()] + " " + d.getUTCDate(); }
    el.dataset.drawn = "1";
    new window.uPlot({
      width: width,
      height: 240,
      series: series,
      legend: { live: false },  // names and colours, not the values under a pointer ("--" until hovered)
      axes: [
        { splits: function () { return ticks; }, values: function (u, splits) { return splits.map(day); } },
        { label: data.unit },
      ],
      scales: {
        x: { time: true, range: function (u, min, max) { return [min - 43200, max + 43200]; } },
        y: { range: function (u, min, max) { return [0, max > 0 ? max * 1.1 : 1]; } },  // bars stand on zero
      },
    }, [xs].concat(order.map(function (i) { return stacked[i]; })), el);
  }

  function onCopy(event) {
    var button = event.target.closest("button.copy");
    if (!button) return;
    var input = document.getElementById(button.dataset.copy);
    input.select();
    if (navigator.clipboard) navigator.clipboard.writeText(input.value);
    button.textContent = "Copied";
  }


  // The playground: a run's events (server-sent, the API's own stream) rendered as they come: text deltas into the
  // answer, each tool call when its step starts and its output when it ends, the run's status, and each model
  // call's compute. When the stream ends, the server's rendering of the conversation replaces the live one.
  var playground = null;  // {source, section}

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = text;
    return node;
  }

  function bubble(chat, id, role) {
    var found = document.getElementById("m-" + id);
    if (found) return found;
    var item = el("li", "msg " + role);
    item.id = "m-" + id;
    item.appendChild(el("strong", null, role));
    chat.appendChild(item);
    return item;
  }

  function textOf(item) {
    var text = item.querySelector("p.text");
    if (!text) text = item.appendChild(el("p", "text"));
    return text;
  }

  function toolLine(call) {
    var line = el("p", "tool", "tool call: ");
    var fn = call["function"] || call;
    line.appendChild(el("code", null, fn.name + "(" + fn.arguments + ")"));
    return line;
  }

  function setText(id, text) {
    var node = document.getElementById(id);
    if (node) node.textContent = text;
  }

  function onRunEvent(section, name, data) {
    var chat = section.querySelector("#chat");
    if (name === "thread.message.created" || name === "thread.message.in_progress") {
      var calls = data.tool_calls && data.tool_calls.length;
      if (data.role !== "tool" && data.content) textOf(bubble(chat, data.id, data.role)).textContent = data.content;
      else if (data.role === "assistant" && !calls) bubble(chat, data.id, "assistant");  // its deltas follow
    } else if (name === "thread.message.delta") {
      var text = textOf(bubble(chat, data.id, "assistant"));
      text.textContent += (data.delta && data.delta.content) || "";
    } else if (name === "thread.message.completed" && data.role !== "tool") {
      if (data.content) textOf(bubble(chat, data.id, data.role)).textContent = data.content;
    } else if (name === "thread.run.step.created" && data.type === "tool_call" && data.tool_call) {
      var step = el("li", "msg tool running");
      step.id = "s-" + data.id;
      step.appendChild(el("strong", null, "tool"));
      step.appendChild(toolLine(data.tool_call));
      step.appendChild(el("p", "output", "running…"));
      chat.appendChild(step);
    } else if (name.indexOf("thread.run.step.") === 0 && data.type === "tool_call" && data.status !== "in_progress") {
      var done = document.getElementById("s-" + data.id);
      if (done) {
        done.classList.remove("running");
        done.querySelector("p.output").textContent = (data.is_error ? "error: " : "→ ") + (data.output || "");
      }
    } else if (name === "thread.run.step.completed" && data.type === "model_call") {
      var row = el("tr");
      var usage = data.usage || {};
      row.appendChild(el("th", null, data.model)).setAttribute("scope", "row");
      row.appendChild(el("td", null, usage.input_tokens + " / " + usage.output_tokens));
      row.appendChild(el("td", "chip-us", (data.chip_us || 0).toLocaleString("en-US")));
      row.appendChild(el("td", "ttft", data.ttft_ms === null || data.ttft_ms === undefined ? "—" : data.ttft_ms.toFixed(1)));
      row.appendChild(el("td", "replica")).appendChild(el("code", null, data.replica || "—"));
      section.querySelector("#model-calls tbody").appendChild(row);
    } else if (name === "thread.run.requires_action" && data.required_action) {
      data.required_action.tool_calls.forEach(function (call) {
        var pending = el("li", "msg pending");
        pending.appendChild(el("strong", null, "waiting for you"));
        pending.appendChild(toolLine(call));
        chat.appendChild(pending);
      });
    }
    if (name.indexOf("thread.run.") === 0 && name.indexOf("thread.run.step.") !== 0 && data.status) {
      setText("run-status", data.status);
      if (data.usage) setText("run-tokens", data.usage.input_tokens + " tokens in, " + data.usage.output_tokens + " out");
      if (data.chip_us !== undefined) setText("run-chip-us", data.chip_us.toLocaleString("en-US"));
    }
  }

  function stopStream() {
    if (playground) playground.source.close();
    playground = null;
  }

  function showResult(section) {
    var url = section.dataset.result;
    if (window.htmx) {
      window.htmx.ajax("GET", url, { target: "#result", swap: "outerHTML" });
    } else {
      window.location.reload();
    }
  }

  function streamRun() {
    var section = document.querySelector("#result[data-stream]");
    if (!section || section.dataset.streaming) return;
    stopStream();
    section.dataset.streaming = "1";
    var source = new EventSource(section.dataset.stream);
    playground = { source: source, section: section };
    var names = [
      "thread.run.created", "thread.run.queued", "thread.run.in_progress", "thread.run.requires_action",
      "thread.run.completed", "thread.run.failed", "thread.run.cancelled", "thread.run.incomplete",
      "thread.run.expired", "thread.run.step.created", "thread.run.step.completed", "thread.run.step.failed",
      "thread.run.step.cancelled", "thread.run.step.expired", "thread.message.created",
      "thread.message.in_progress", "thread.message.delta", "thread.message.completed",
    ];
    names.forEach(function (name) {
      source.addEventListener(name, function (event) {
        if (!section.isConnected) return stopStream();
        onRunEvent(section, name, JSON.parse(event.data));
      });
    });
    source.addEventListener("done", function () {
      stopStream();
      if (section.isConnected) showResult(section);
    });
    source.onerror = function () {
      // The server closed the stream without "done" (a restart): the page as the server has it now.
      if (source.readyState === EventSource.CLOSED && playground && playground.source === source) {
        stopStream();
        if (section.isConnected) showResult(section);
      }
    };
  }

  // The agent builder. A JSON field is parsed as it is typed (a syntax error at once); a JSON Schema is then
  // checked by the server with the agent spec's own validation (debounced). A problem is said in the field's live
  // status line and blocks saving (setCustomValidity); the server checks again on save. The instructions get a
  // preview of their Markdown, built as DOM nodes (text is never parsed as HTML).
  var schemaTimers = {};

  function csrfToken() {
    try { return JSON.parse(document.body.getAttribute("hx-headers"))["X-CSRF-Token"]; } catch (e) { return ""; }
  }

  function setStatus(area, ok, message) {
    var status = document.getElementById(area.id + "-status");
    area.setCustomValidity(ok ? "" : message);
    if (ok) area.removeAttribute("aria-invalid"); else area.setAttribute("aria-invalid", "true");
    if (!status) return;
    status.textContent = message;
    status.className = "hint json-status " + (ok ? "valid" : "invalid");
  }

  function checkJson(area) {
    var text = area.value.trim();
    clearTimeout(schemaTimers[area.id]);
    if (!text) { setStatus(area, true, ""); return; }
    try { JSON.parse(text); } catch (e) { setStatus(area, false, "Not JSON: " + e.message); return; }
    var kind = area.dataset.schemaKind;
    var url = area.form && area.form.dataset.schemaCheck;
    if (!kind || !url) { setStatus(area, true, "Valid JSON"); return; }
    setStatus(area, true, "Checking the schema…");
    var sent = area.value;
    schemaTimers[area.id] = setTimeout(function () {
      fetch(url, {
        method: "POST",
        body: new URLSearchParams({ schema: sent, kind: kind }),
        headers: { "X-CSRF-Token": csrfToken() },
        credentials: "same-origin",
      }).then(function (r) { return r.json(); }).then(function (answer) {
        if (area.value !== sent) return;  // typed on since: its own check follows
        setStatus(area, answer.valid, answer.valid ? "Valid JSON Schema" : answer.message);
      }).catch(function () { setStatus(area, true, ""); });  // the server decides on save
    }, 400);
  }

  function inline(parent, text) {
    var pattern = /(`[^`]+`|\*\*[^*]+\*\*|\*[^*\s][^*]*\*)/g;
    var last = 0;
    var m;
    while ((m = pattern.exec(text))) {
      if (m.index > last) parent.appendChild(document.createTextNode(text.slice(last, m.index)));
      var t = m[0];
      if (t[0] === "`") parent.appendChild(el("code", null, t.slice(1, -1)));
      else if (t.slice(0, 2) === "**") parent.appendChild(el("strong", null, t.slice(2, -2)));
      else parent.appendChild(el("em", null, t.slice(1, -1)));
      last = pattern.lastIndex;
    }
    if (last < text.length) parent.appendChild(document.createTextNode(text.slice(last)));
  }

  function renderMarkdown(target, source) {
    target.textContent = "";
    var list = null, para = null, code = null;
    source.replace(/\r\n/g, "\n").split("\n").forEach(function (line) {
      if (code) {
        if (/^```/.test(line)) code = null; else code.textContent += line + "\n";
        return;
      }
      var heading = /^(#{1,6})\s+(.*)$/.exec(line);
      var item = /^\s*(?:[-*+]|\d+[.)])\s+(.*)$/.exec(line);
      if (/^```/.test(line)) {
        list = para = null;
        code = target.appendChild(el("pre")).appendChild(el("code"));
      } else if (!line.trim()) {
        list = para = null;
      } else if (heading) {
        list = para = null;
        inline(target.appendChild(el("h" + Math.min(6, heading[1].length + 3))), heading[2]);
      } else if (item) {
        para = null;
        if (!list) list = target.appendChild(el(/^\s*\d/.test(line) ? "ol" : "ul"));
        inline(list.appendChild(el("li")), item[1]);
      } else {
        list = null;
        if (para) para.appendChild(document.createTextNode(" ")); else para = target.appendChild(el("p"));
        inline(para, line);
      }
    });
    if (!source.trim()) target.appendChild(el("p", "hint", "(no instructions)"));
  }

  function setUpBuilder() {
    var form = document.getElementById("agent-form");
    if (!form || form.dataset.ready) return;
    form.dataset.ready = "1";
    var instructions = document.getElementById("instructions");
    var preview = document.getElementById("instructions-preview");
    if (instructions && preview) {
      var body = document.getElementById("instructions-preview-body");
      var update = function () { renderMarkdown(body, instructions.value); };
      preview.hidden = false;
      instructions.addEventListener("input", update);
      update();
    }
    Array.prototype.forEach.call(form.querySelectorAll("textarea.json"), function (area) {
      area.addEventListener("input", function () { checkJson(area); });
      if (area.value.trim()) checkJson(area);
    });
  }

  document.addEventListener("htmx:beforeSwap", function (event) {
    if (playground && event.detail.target && event.detail.target.contains(playground.section)) {
      if (event.detail.target.id !== "result") stopStream();  // leaving the page (the fragment swap ends it anyway)
    }
  });

  document.addEventListener("click", onCopy);
  document.addEventListener("DOMContentLoaded", drawUsage);
  document.addEventListener("htmx:load", drawUsage);
  document.addEventListener("DOMContentLoaded", streamRun);
  document.addEventListener("htmx:load", streamRun);
  document.addEventListener("DOMContentLoaded", setUpBuilder);
  document.addEventListener("htmx:load", setUpBuilder);
})();
