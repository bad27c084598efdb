<?php
// Sleeps ?ms= milliseconds before answering.
$ms = isset($_GET['ms']) ? (int)$_GET['ms'] : 100;
usleep($ms * 1000);
echo "slept $ms\n";
