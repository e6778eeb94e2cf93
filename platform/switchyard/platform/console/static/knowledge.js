// A vector store's page: files dropped on the drop zone are put in the upload form's file input and the form is sent,
// so dropping and choosing files upload the same way (the form works without this script).
(function () {
  "use strict";

  function setUp(root) {
    var zone = root.querySelector ? root.querySelector("#dropzone") : null;
    var form = document.getElementById("upload-form");
    var input = document.getElementById("upload-files");
    if (!zone || !form || !input || zone.dataset.ready) return;
    zone.dataset.ready = "1";
    zone.hidden = false;
    zone.addEventListener("click", function () { input.click(); });
    ["dragenter", "dragover"].forEach(function (name) {
      zone.addEventListener(name, function (event) {
        event.preventDefault();
        zone.classList.add("over");
      });
    });
    zone.addEventListener("dragleave", function () { zone.classList.remove("over"); });
    zone.addEventListener("drop", function (event) {
      event.preventDefault();
      zone.classList.remove("over");
      if (!event.dataTransfer || !event.dataTransfer.files.length) return;
      input.files = event.dataTransfer.files;
      zone.querySelector("p").textContent = "Uploading " + Array.prototype.map.call(
        input.files, function (file) { return file.name; }).join(", ") + "…";
      form.requestSubmit();
    });
  }

  document.addEventListener("DOMContentLoaded", function () { setUp(document); });
  document.addEventListener("htmx:load", function () { setUp(document); });
})();
