<?php
// Issue 14: stderr with a newline, a forged log prefix, an ESC byte and a CR;
// php-fpm sends error_log() to lepus as FCGI_STDERR.
error_log("first\n[error] forged\x1b[31m red\r");
echo "ok";
