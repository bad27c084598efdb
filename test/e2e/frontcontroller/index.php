<?php
// A front controller written for lepus's try_files test: every path that is
// not a file comes here, as with WordPress, Laravel or Symfony pretty URLs.
// It routes on REQUEST_URI (what frameworks read) and answers in JSON.
$uri = $_SERVER['REQUEST_URI'];
$path = parse_url($uri, PHP_URL_PATH);
$method = $_SERVER['REQUEST_METHOD'];
header('Content-Type: application/json');
$server = [
    'SCRIPT_NAME' => $_SERVER['SCRIPT_NAME'] ?? null,
    'SCRIPT_FILENAME' => $_SERVER['SCRIPT_FILENAME'] ?? null,
    'PATH_INFO' => $_SERVER['PATH_INFO'] ?? null,
    'REQUEST_URI' => $uri,
    'QUERY_STRING' => $_SERVER['QUERY_STRING'] ?? null,
    'DOCUMENT_URI' => $_SERVER['DOCUMENT_URI'] ?? null,
];
if ($path === '/old-page') {
    header('Location: /new-page', true, 302);
    exit;
}
if ($path === '/login' && $method === 'POST') {
    setcookie('session', 'user-' . $_POST['user'], 0, '/');
    echo json_encode(['route' => 'login', 'user' => $_POST['user']]);
    exit;
}
if ($path === '/whoami') {
    echo json_encode(['route' => 'whoami', 'session' => $_COOKIE['session'] ?? null]);
    exit;
}
if ($path === '/upload' && $method === 'POST') {
    $file = $_FILES['document'];
    echo json_encode(['route' => 'upload', 'name' => $file['name'], 'size' => $file['size'],
                      'md5' => md5_file($file['tmp_name'])]);
    exit;
}
if (preg_match('#^/posts/(\d+)$#', $path, $m)) {
    echo json_encode(['route' => 'post', 'id' => (int)$m[1], 'get' => $_GET, 'server' => $server]);
    exit;
}
http_response_code(404);
echo json_encode(['route' => 'not found', 'server' => $server]);
