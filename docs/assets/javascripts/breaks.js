// Code in a table cell breaks only after a dot, underscore, slash, comma, colon or equals sign
// (a <wbr> after each, which copying leaves out), never mid-word: a narrow column broke key
// names as `checkpoints.topic.replic|ation.factor`. site.css keeps other breaks out.
(function () {
  function mark() {
    document.querySelectorAll(".md-typeset td code").forEach(function (code) {
      var walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
      var texts = [];
      for (var node = walker.nextNode(); node; node = walker.nextNode()) { texts.push(node); }
      texts.forEach(function (text) {
        var parts = text.data.split(/(?<=[._\/,:=])(?=.)/);
        if (parts.length < 2) { return; }
        var marked = document.createDocumentFragment();
        parts.forEach(function (part, i) {
          if (i) { marked.appendChild(document.createElement("wbr")); }
          marked.appendChild(document.createTextNode(part));
        });
        text.parentNode.replaceChild(marked, text);
      });
    });
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", mark);
  } else {
    mark();
  }
})();
