// The UI's little script: panels that open, and confirmations before destructive forms.
document.addEventListener("click", (event) => {
  const toggle = event.target.closest("[data-toggle]");
  if (!toggle) return;
  const panel = document.getElementById(toggle.dataset.toggle);
  if (panel) {
    panel.hidden = !panel.hidden;
    const first = panel.querySelector("input:not([type=hidden]), select, textarea");
    if (!panel.hidden && first) first.focus();
  }
});

document.addEventListener("submit", (event) => {
  const form = event.target;
  if (form.dataset.confirm && !window.confirm(form.dataset.confirm)) {
    event.preventDefault();
    return;
  }
  const name = form.dataset.confirmName;
  if (name) {
    const typed = window.prompt(`Delete repository ${name} and all its history? Type its name to confirm.`);
    if (typed === null) {
      event.preventDefault();
      return;
    }
    form.querySelector("input[name=confirm]").value = typed;
  }
});
