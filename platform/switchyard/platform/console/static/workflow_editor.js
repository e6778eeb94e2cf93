// The workflow editor's canvas: choosing a node (click, or Enter/Space when it has focus) moves focus to its section
// of the list, where its fields are. The list is the editor; the canvas is drawn by the server, so without this
// script nothing is lost but the shortcut. No inline script anywhere.
(function () {
  "use strict";

  function goToSection(box) {
    var section = document.getElementById(box.getAttribute("data-section"));
    if (!section) return;
    section.scrollIntoView({ block: "start" });
    section.focus();
  }

  document.addEventListener("click", function (event) {
    var box = event.target.closest && event.target.closest(".wf-box[data-section]");
    if (box) goToSection(box);
  });

  document.addEventListener("keydown", function (event) {
    if (event.key !== "Enter" && event.key !== " ") return;
    var box = event.target.closest && event.target.closest(".wf-box[data-section]");
    if (!box) return;
    event.preventDefault();
    goToSection(box);
  });
})();
