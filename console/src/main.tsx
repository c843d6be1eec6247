// The console's front-end: filled in by the next commit (the screens).
const root = document.getElementById('console');
if (root !== null) root.textContent = 'The console is on its way.';
