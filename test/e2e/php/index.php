<?php
// A directory index script.
echo "index of " . $_SERVER['SCRIPT_NAME'] . "\n";
