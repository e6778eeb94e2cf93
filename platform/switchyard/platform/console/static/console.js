// The console's own script: the usage chart (uPlot, vendored) and copy buttons. No inline script anywhere.
(function () {
  "use strict";
  var COLORS = ["#1f6feb", "#d97706", "#059669", "#9333ea", "#dc2626", "#0891b2", "#65a30d", "#db2777"];

  function drawUsage() {
    var el = document.getElementById("usage-chart");
    var source = document.getElementById("usage-data");
    if (!el || !source || !window.uPlot || el.dataset.drawn) return;
    var data = JSON.parse(source.textContent);
    var xs = data.days.map(function (d) { return Date.parse(d + "T00:00:00Z") / 1000; });
    // Stacked: each series is drawn as the running sum of itself and the ones before it.
    var running = xs.map(function () { return 0; });
    var stacked = data.chip_hours.map(function (row) {
      running = running.map(function (sum, i) { return sum + row[i]; });
      return running.slice();
    });
    // Drawn from the top of the stack down, so each lower band's fill stays visible over the one above.
    var bars = window.uPlot.paths.bars({ size: [0.7, 60] });  // one bar a day
    var order = data.series.map(function (_, i) { return i; }).reverse();
    var series = [{}].concat(order.map(function (i) {
      var color = COLORS[i % COLORS.length];
      return { label: data.series[i], stroke: color, fill: color + "99", width: 1, paths: bars };
    }));
    var width = Math.max(280, el.clientWidth - 16 || 600);
    el.dataset.drawn = "1";
    new window.uPlot({
      width: width,
      height: 240,
      series: series,
      axes: [{}, { label: "chip-hours" }],
      scales: { x: { time: true, range: function (u, min, max) { return [min - 43200, max + 43200]; } } },
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

  document.addEventListener("click", onCopy);
  document.addEventListener("DOMContentLoaded", drawUsage);
  document.addEventListener("htmx:load", drawUsage);
})();
